"""Running notifications: one attempt, and the service loop around it."""
