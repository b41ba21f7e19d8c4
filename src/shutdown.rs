//! Ctrl-C and SIGTERM: one cancellation token for the whole process, so every task winds
//! down through its normal cleanup path.
