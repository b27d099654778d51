// The notify-file layer had a public `shm::remove_namespace` that removed only the notify
// files, though callers want a namespace gone with every kind of file (count notifies,
// events, memory). `Sim::remove_namespace` is the one way to remove a namespace.
fn main() {
    let _ = acl_notify_sim::shm::remove_namespace("ns");
}
