"""The demo app that ships with k8slease: a billing app with the three job classes.

``k8slease demo`` runs replicas of it (``python -m k8slease.cli.demoapp.billing_app``), and so
does the Helm chart's example Deployment, from the installed package: no checkout needed.
``examples/`` in the repository holds the same app for reading.
"""
