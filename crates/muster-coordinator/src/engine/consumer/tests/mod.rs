//! Tests of the consumer-protocol engine, one file per engine file, each case named after the
//! Kafka 4 test it follows.

mod assign;
mod durability;
mod group;
mod harness;
mod migrate;
mod ownership;
mod range;
mod reconcile;
mod simulate;
mod uniform;
mod wait;
