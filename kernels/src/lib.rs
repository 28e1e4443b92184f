//! memlane's numeric kernels: the loops its models and its index spend their time in.
//!
//! A crate of their own so that they are always built optimised: memlane's test builds
//! compile memlane itself unoptimised (most of the suite's build time otherwise), and call
//! these. Not a stable API: memlane is its one user.

#[cfg(feature = "encoder")]
pub mod bert;
pub mod graph;
#[cfg(feature = "encoder")]
pub mod matmul;
#[cfg(feature = "quantized")]
pub mod quantized;
pub mod vector;
