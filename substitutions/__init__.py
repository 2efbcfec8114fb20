"""taso.substitutions"""
