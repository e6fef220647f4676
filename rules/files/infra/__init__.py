"""CN76x containers, clusters and CI: docker compose, Kubernetes manifests, GitHub Actions / GitLab CI.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
