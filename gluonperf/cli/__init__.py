"""What every command line shares: flags, argument types, defaults and choices, emit, run."""
