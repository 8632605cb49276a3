"""The record of a research and its transitions: the rows every step writes, their locks and counters, events and
their numbering, what model calls spent."""
