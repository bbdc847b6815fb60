# The driver's own pieces: progress lines, the command line and provenance; the whole program
# is covered by tests/e2e.cmake.
ringbench_add_doctest(TARGET test_driver SOURCES driver/test_progress.cpp driver/test_cli.cpp
                      LIBS rb_app)
ringbench_add_test(NAME driver RANKS 1 LABELS unit COMMAND $<TARGET_FILE:test_driver>)
