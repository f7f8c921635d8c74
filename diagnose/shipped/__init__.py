"""Programs copied to the hosts and run there with nothing but the standard library and torch. They
import nothing of diagnose but :mod:`common`, their shared start-up and progress lines, which the launcher
copies beside each program (a test enforces both); the controller may import them for their constants.
"""
