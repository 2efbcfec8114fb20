"""taso.backends"""
