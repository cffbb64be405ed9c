"""The reader: a cross-encoder trained here that reads a question against one sentence of the book
and gives P(the sentence states the answer) and the answer span (see reader.py)."""
from .inputs import Limits, Passage, around
from .reader import Read, Reader, forget_readers, packaged_reader, prefetch_reader

__all__ = ["Limits", "Passage", "Read", "Reader", "around", "forget_readers", "packaged_reader", "prefetch_reader"]
