"""Tests of kreward.pages: the report pages, rendered by headless Chromium
where it is installed (scripts/deps.sh installs Debian's chromium for the
tests). A package, like tests/kernelbench; bindings/python/tests/conftest.py
applies to them."""
