"""Helpers every test folder shares, importable as ``support`` (pytest puts ``tests/`` on sys.path).

- ``support.trees``: real trees (``make_tree``), the immutable flag, path listings;
- ``support.gitrepo``: git with a fixed, configuration-free environment;
- ``support.keys``: signing keys made once per session, the Sigstore vectors in ``tests/data``;
- ``support.build``: real wheels, toolchain repositories and locks for the build tests;
- ``support.github_replay``: a real HTTP server on 127.0.0.1 replaying hosting-API responses.
"""
