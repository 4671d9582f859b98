"""Host-failure recovery engine for OpenStack Nova."""
