"""The referee: recompute the one contested operation of a dispute and rule.

``recompute`` runs one operation on tensors whose digests both parties agreed on;
``worker`` follows the service's disputes and posts signed rulings. The parties' side
(traces and answers) is :mod:`hypertrain.evidence`.
"""
