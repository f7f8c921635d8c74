"""Reading torch.profiler traces of a training job and judging them (checklist section 4).

``reader`` streams the events, ``intervals`` holds the interval arithmetic, ``analyze`` turns one rank's
trace into per-step metrics, ``judge`` turns the ranks' metrics into the ``train.*`` checks.
"""
