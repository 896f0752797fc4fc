// omniORB consumer for the event-channel benchmark (channel_bench.idl, bench_common.h).
//
//   corba_consumer <ior-file> -ORBendPoint giop:tcp:127.0.0.1:0 [other -ORB options]
//
// Writes its object reference to <ior-file> (run.sh waits for it) and serves until the
// supplier calls quit(). The echo returns the received sequence without copying it: the
// returned sequence borrows the in argument's buffer, which the ORB keeps alive until the
// reply is marshalled, so CORBA is not charged a copy that the other peers do not make.
#include "channel_bench.hh"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

class ConsumerImpl : public POA_ChannelBench::Consumer {
  public:
    explicit ConsumerImpl(CORBA::ORB_ptr orb) : orb_(CORBA::ORB::_duplicate(orb)) {}

    void push(const ChannelBench::Event &) override
    {
        std::lock_guard<std::mutex> g(mu_);
        received_++;
        if (received_ >= want_)
            cv_.notify_all();
    }

    ChannelBench::Event *ping(const ChannelBench::Event &e) override
    {
        ChannelBench::Event &in = const_cast<ChannelBench::Event &>(e);
        return new ChannelBench::Event(in.maximum(), in.length(), in.get_buffer(), false);
    }

    CORBA::Long wait_for(CORBA::Long total) override
    {
        std::unique_lock<std::mutex> g(mu_);
        want_ = total;
        // Oneway pushes may be dispatched by other threads of the connection: wait for
        // them (30 s at most, so a lost event shows as a short count, never as a hang).
        cv_.wait_for(g, std::chrono::seconds(30), [&] { return received_ >= total; });
        return (CORBA::Long)received_;
    }

    void quit() override { orb_->shutdown(false); }

  private:
    CORBA::ORB_var orb_;
    std::mutex mu_;
    std::condition_variable cv_;
    long received_ = 0;
    long want_ = 0x7fffffff;
};

int main(int argc, char **argv)
{
    try {
        CORBA::ORB_var orb = CORBA::ORB_init(argc, argv);
        if (argc != 2) {
            std::fprintf(stderr, "usage: %s <ior-file> [-ORB options]\n", argv[0]);
            return 2;
        }
        CORBA::Object_var obj = orb->resolve_initial_references("RootPOA");
        PortableServer::POA_var poa = PortableServer::POA::_narrow(obj);
        ConsumerImpl *servant = new ConsumerImpl(orb);
        PortableServer::ObjectId_var id = poa->activate_object(servant);
        obj = servant->_this();
        CORBA::String_var ior = orb->object_to_string(obj);
        servant->_remove_ref();
        poa->the_POAManager()->activate();
        std::string tmp = std::string(argv[1]) + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "w");
        if (!f || std::fprintf(f, "%s\n", (const char *)ior) < 0 || std::fclose(f) != 0 ||
            std::rename(tmp.c_str(), argv[1]) != 0) {
            std::perror(argv[1]);
            return 1;
        }
        orb->run();
        orb->destroy();
    } catch (const CORBA::Exception &e) {
        std::fprintf(stderr, "corba_consumer: CORBA exception %s\n", e._name());
        return 1;
    }
    return 0;
}
