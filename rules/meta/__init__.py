"""CN9xx: about cuda2neuron itself (its suppression comments), not about CUDA code."""
