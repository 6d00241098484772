"""Producing: the worker's ``StreamsProducer`` (exactly-once transactions included), which
librdkafka producers it runs, the ``RecordCollector`` over it, and the changelog records sent
without a delivery report and proved written by offsets.
"""
