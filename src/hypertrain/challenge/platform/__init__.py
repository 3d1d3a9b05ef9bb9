"""The platform's side: the metagraph, the ``get_weights`` answers and the metrics."""
