"""Tests of kreward.kernelbench (CPU; the GPU ones are marked gpu). A
package, so its test files may share names with those one folder up
(test_gpu.py); bindings/python/tests/conftest.py applies to them."""
