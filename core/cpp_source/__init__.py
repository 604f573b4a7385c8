"""Support shared by DSLs whose kernels are C++ source files (CUDA, SYCL, ...).

* :mod:`.abi` -- the ``kp_tensor`` C ABI: ONE definition in Python, from which the ctypes structure and
  the header ``include/kernelpilot_tensor.hpp`` are generated;
* :mod:`.build` -- cached compiler runs (``cached_build``), ``run_tool``, compiler-log cleaning;
* :mod:`.analysis` -- comment stripping and the regex analyzer with line numbers;
* :mod:`.tunables` -- the spec's ``tunables:`` section and its search;
* :mod:`.stages` -- the rules stages every C++ DSL shares (``double`` -> ``float``, tunables search);
* :mod:`.executor` -- the job executor for compiled sources (PyTorch reference oracle, parallel prebuild).
"""
