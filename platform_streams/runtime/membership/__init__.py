"""Membership: who belongs to the application and what each client runs.

The client's stable identity and state-directory lock, the control topic (heartbeats, task
positions, the leader's placement, SHUTDOWN_APPLICATION), standby placement, the classic
group's assignment checks, the wait for an assignment and the repair of a wedged group, the
guard that keeps a stopping worker from leaving mid-rebalance, regex-subscription refresh, and
membership in a streams group (KIP-1071). The assignors themselves are
:mod:`platform_streams.runtime.task_assignment`.
"""
