# Config module: YAML schema, typed accessors and the malformed-config table.
ringbench_add_doctest(TARGET test_config SOURCES config/test_config.cpp LIBS rb_config)
ringbench_add_test(NAME config RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_config>)
