"""Each chapter's own code, one module per chapter (ch01 ... ch10): its tasks, helpers, figures, recorded-result
readers and exercise checkers.

The core (book/*.py) holds what two or more chapters or the benchmarks use; code that only one chapter uses lives
here, in that chapter's module. The core never imports a chapter module, and a chapter module never imports another
chapter's (tests/test_layering.py).
"""
