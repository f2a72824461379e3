"""One package per protocol (``harness/packages/<protocol>/``, each exposing ``PACKAGE``), found
through the one map in `harness.registry`. The types they are built from are in `base`."""
