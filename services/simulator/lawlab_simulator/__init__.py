"""The simulator service: the only holder of hidden laws."""
