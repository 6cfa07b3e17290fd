"""Tables and plots made from workdir files alone."""
