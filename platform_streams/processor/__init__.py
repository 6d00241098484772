"""Processor API: processors, records, contexts, punctuation and task identity."""

from platform_streams.processor.api import (
    Cancellable,
    Processor,
    ProcessorContext,
    ProcessorSupplier,
    PunctuationType,
    Punctuator,
)
from platform_streams.processor.async_processing import AsyncRecordContext
from platform_streams.processor.async_runtime import AsyncOptions
from platform_streams.processor.fixed_key import (
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyProcessorSupplier,
    FixedKeyRecord,
)
from platform_streams.processor.record import Headers, Record, RecordMetadata
from platform_streams.processor.task_id import TaskId
from platform_streams.processor.wrapper import ProcessorWrapper
from platform_streams.state.api import StateStore  # one StateStore type

__all__ = [
    "AsyncOptions",
    "AsyncRecordContext",
    "Cancellable",
    "FixedKeyProcessor",
    "FixedKeyProcessorContext",
    "FixedKeyProcessorSupplier",
    "FixedKeyRecord",
    "Headers",
    "Processor",
    "ProcessorContext",
    "ProcessorSupplier",
    "ProcessorWrapper",
    "PunctuationType",
    "Punctuator",
    "Record",
    "RecordMetadata",
    "StateStore",
    "TaskId",
]
