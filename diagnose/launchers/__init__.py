"""Starting a distributed program across hosts, following it, stopping it and bringing its evidence home:
one module per kind of launch (torchrun, mpirun, srun) over the common life cycle in :mod:`.base`.
"""
