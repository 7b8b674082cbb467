pytest_plugins = ["pytester"]
collect_ignore = ["fake_suite"]  # the suite under test, run by the tests in fresh pytest processes
