"""The run itself: the host stage fanned out over connectors, cluster rules, the benchmark stage, samples
under load, the second snapshot, the results stream, the lock and time budget of unattended runs.
"""
