"""An application's settings: one module per concern.

* :mod:`.streams_config` -- :class:`StreamsConfig`, the validated model (every setting,
  its default, its check) and the client configurations derived from it;
* :mod:`.sources` -- reading settings: Java property names, environment variables, files;
* :mod:`.layers` -- the named layers (defaults, file, environment, overrides) and the check
  of pass-through client keys;
* :mod:`.rocksdb` -- the RocksDB settings (byte sizes, the config setter);
* :mod:`.secret_keys` -- which settings are credentials, and masking their values.
"""

from platform_streams.config.layers import Layers
from platform_streams.config.secret_keys import is_secret_key
from platform_streams.config.streams_config import (
    TOPOLOGY_OPTIMIZATIONS,
    ExceptionHandlerSpec,
    StreamsConfig,
)

__all__ = ["TOPOLOGY_OPTIMIZATIONS", "ExceptionHandlerSpec", "Layers", "StreamsConfig", "is_secret_key"]
