"""Runnable examples of platform_streams applications.

* :mod:`examples.orders_app` - an order-routing application (the CLI's example factory);
* :mod:`examples.demo` - ``make demo``: the example end to end on an embedded broker.
"""
