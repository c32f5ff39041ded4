"""The test suite: one folder per package of the project, named as the package it tests."""
