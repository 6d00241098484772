"""platform_streams"""
