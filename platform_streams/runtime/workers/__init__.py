"""Workers (Kafka Streams' stream threads): ``StreamWorker``'s loop and its rebalance,
cooperative-handover and streams-group sides, the input queues and their offset-gap guard, the
``GlobalStreamWorker``, and the supervision of worker processes.
"""
