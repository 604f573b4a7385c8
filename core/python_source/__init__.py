"""Support shared by DSLs whose kernel file is Python with a ``Model`` class (Triton, Gluon, a CUDA
extension built with ``load_inline``): static checks, the float64 rewrite, and recognising a
``load_inline`` CUDA extension.  Parsed with ``ast``/``tokenize`` only, never imported."""
