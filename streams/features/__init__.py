"""Point-in-time features: definitions, windows, the Redis key layout and the typed views read
from it. The feature worker writes them; the scorer, the trainer and the monitor read them."""
