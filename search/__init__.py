"""taso.search"""
