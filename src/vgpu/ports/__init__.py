"""What the application needs from the outside world, as typing.Protocols."""
