raise RuntimeError("this file is broken on purpose")
