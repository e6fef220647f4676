"""Emulated neuron device."""
