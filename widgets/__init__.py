"""The tirx notebook layer: the ``%%tirx`` magic and fragment-layout views.

Uses only tirx's public names. Loaded by ``%load_ext tirx``.
"""
