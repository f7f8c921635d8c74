"""Programs copied to the hosts and run there with nothing but the standard library and torch. They
import nothing of diagnose (a test enforces it); the controller may import them for their constants.
"""
