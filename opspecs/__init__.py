"""taso.opspecs"""
