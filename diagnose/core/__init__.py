"""The vocabulary every room shares: results model, the Check shape, hosts and their variables, errors,
units, redaction and bounded streams. Imports nothing else of diagnose.
"""
