"""minisandbox: container-free environments for training and evaluating SWE agents."""

__version__ = "0.1.0"
