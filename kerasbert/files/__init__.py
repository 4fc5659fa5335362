"""Files: atomic writes (``atomic``) and strict reading of data files (``data``).

Every file the kit writes appears complete or not at all; every data file it
reads fails with one line naming the file, line and problem.
"""
