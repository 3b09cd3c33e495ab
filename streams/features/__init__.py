"""Point-in-time features: definitions, windows, keys, the Lua batch writer and its oracle."""
