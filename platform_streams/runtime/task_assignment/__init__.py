"""State-aware task assignment (Kafka Streams' KIP-441 assignor), client-side.

* :mod:`.client_state`, :mod:`.high_availability`, :mod:`.task_movement`,
  :mod:`.standby_assignors`: the pure placement function, translated from Kafka Streams'
  ``HighAvailabilityTaskAssignor``, ``TaskMovement``, ``DefaultStandbyTaskAssignor`` and
  ``ClientTagAwareStandbyTaskAssignor``;
* :mod:`.rack_aware`, :mod:`.min_cost_flow`: rack-aware active placement (KIP-925),
  translated from Kafka Streams' ``RackAwareTaskAssignor`` and its min-cost-flow ``Graph``;
* :mod:`.members`: from one client's tasks to its group members (threads);
* :mod:`.protocol`: the assignment protocol over the consumer group and the control topic;
* :mod:`.coordinator`: one per client, runs the protocol for its workers.
"""
